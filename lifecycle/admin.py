"""Django admin: tokens are created and revoked here through the token services (so each is
journaled and the clear key is shown exactly once); the domain tables are read-only, because
every state change goes through a service that journals it (semantics §3, §10)."""

from django import forms
from django.contrib import admin, messages

from lifecycle.services.tokens import InvalidToken, clean_name, token_create, token_revoke

from .models import ApiToken, JournalEvent, Report, Rule, TokenRole, Trajectory


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Rule)
class RuleAdmin(ReadOnlyAdmin):
    list_display = ("id", "state", "scope", "metric", "pending_reason", "author", "recorded_at")
    list_filter = ("state", "scope", "last_validator", "author_kind")
    search_fields = ("id", "trigger", "directive")


@admin.register(JournalEvent)
class JournalEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "type", "rule", "round_id", "actor")
    list_filter = ("type",)
    search_fields = ("rule__id", "actor")


@admin.register(Trajectory)
class TrajectoryAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "corpus", "replayable", "started_at")
    list_filter = ("kind", "replayable", "corpus")
    search_fields = ("id", "task")


@admin.register(Report)
class ReportAdmin(ReadOnlyAdmin):
    list_display = ("session_id", "at", "has_notice", "received_at")
    list_filter = ("has_notice",)
    search_fields = ("session_id",)


class TokenCreateForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ("name", "role")

    role = forms.ChoiceField(choices=TokenRole.choices)

    def clean_name(self):
        try:
            return clean_name(self.cleaned_data["name"])
        except InvalidToken as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "role", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("role",)
    search_fields = ("name", "prefix")
    actions = ["revoke"]
    readonly_fields = (
        "name",
        "role",
        "prefix",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    )
    fields = readonly_fields

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = TokenCreateForm
            kwargs["fields"] = ("name", "role")
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ("name", "role") if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def has_change_permission(self, request, obj=None):
        # Viewing is allowed; nothing about a token is editable (revoke it instead).
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None):
        # Deleting would orphan the journal rows that name the token; revoke instead.
        return False

    def save_model(self, request, obj, form, change):
        try:
            issued = token_create(
                name=form.cleaned_data["name"],
                role=form.cleaned_data["role"],
                actor=f"admin:{request.user.get_username()}",
                created_by=request.user,
            )
        except InvalidToken as exc:
            # The form's own uniqueness check runs first; this is the race it cannot see.
            self.message_user(request, str(exc), messages.ERROR)
            return
        obj.pk = issued.token.pk
        self.message_user(
            request,
            f"Token {issued.token.name!r} ({issued.token.role}): {issued.key} — copy it now, "
            "it is not shown again.",
            messages.WARNING,
        )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        actor = f"admin:{request.user.get_username()}"
        revoked = sum(token_revoke(name=t.name, actor=actor) for t in queryset)
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)
