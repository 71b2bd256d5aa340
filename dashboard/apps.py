from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The server-rendered dashboard: views, filter forms, presenters, figures and templates.
    It owns no models; every read goes through lifecycle and replay."""

    name = "dashboard"
