from django.urls import path

from . import views

urlpatterns = [
    path("", views.rule_list, name="rule-list"),
]
