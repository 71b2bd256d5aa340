"""Rounds pages."""

from django.urls import path

from . import views

urlpatterns = [
    path("rounds/", views.round_list, name="round-list"),
    path("rounds/start/", views.round_start, name="round-start"),
    path("rounds/<int:round_id>/", views.round_detail, name="round-detail"),
]
