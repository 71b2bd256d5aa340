"""Webhooks (docs/webhooks.md): staff configure endpoints, send a test, read each endpoint's
delivery log and send a failed delivery again. Reviewers and viewers see none of it: an
endpoint is where the engine's news leaves the installation."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard.forms import WebhookForm
from lifecycle.outbox import SIGNATURE_HEADER, TIMESTAMP_HEADER
from lifecycle.selectors import webhooks as selectors
from lifecycle.services import webhooks as services

from . import staff_required


def _endpoint(endpoint_id: int):
    endpoint = selectors.endpoint_get(endpoint_id)
    if endpoint is None:
        raise Http404("no such webhook endpoint")
    return endpoint


@staff_required
def webhook_list(request):
    """The endpoints, and a form to add one (POST)."""
    form = WebhookForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            endpoint = services.webhook_create(
                name=data["name"],
                url=data["url"],
                fmt=data["format"],
                topics=data["topics"],
                by=request.user.get_username(),
            )
        except services.InvalidWebhook as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            messages.success(request, f"Endpoint {endpoint.name} added; send it a test.")
            return redirect("webhook-detail", endpoint_id=endpoint.pk)
    status = 400 if form.errors else 200
    context = {"endpoints": selectors.endpoint_list(), "form": form}
    return render(request, "dashboard/webhooks/list.html", context, status=status)


@staff_required
def webhook_detail(request, endpoint_id: int):
    """An endpoint: its settings (POST to change them), its secret, its delivery log."""
    endpoint = _endpoint(endpoint_id)
    initial = {
        "name": endpoint.name,
        "url": endpoint.url,
        "format": endpoint.format,
        "topics": endpoint.topics,
        "active": endpoint.active,
    }
    form = WebhookForm(request.POST or None, initial=initial)
    form.fields["name"].disabled = True
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.webhook_update(
                endpoint_id=endpoint.pk,
                url=data["url"],
                fmt=data["format"],
                topics=data["topics"],
                active=data["active"],
                by=request.user.get_username(),
            )
        except services.InvalidWebhook as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            messages.success(request, f"Endpoint {endpoint.name} saved.")
            return redirect("webhook-detail", endpoint_id=endpoint.pk)
    context = {
        "endpoint": endpoint,
        "form": form,
        "page": selectors.endpoint_deliveries(endpoint, page=request.GET.get("page")),
        "signature_header": SIGNATURE_HEADER,
        "timestamp_header": TIMESTAMP_HEADER,
    }
    status = 400 if form.errors else 200
    return render(request, "dashboard/webhooks/detail.html", context, status=status)


@require_POST
@staff_required
def webhook_test(request, endpoint_id: int):
    """Send a `test` delivery now and say what the receiver answered."""
    endpoint = _endpoint(endpoint_id)
    delivery = services.webhook_test(endpoint_id=endpoint.pk, by=request.user.get_username())
    error = delivery.last_error or "no answer"
    if delivery.status == "delivered":
        messages.success(request, f"Test delivered: the receiver answered {delivery.last_code}.")
    elif delivery.status == "pending" and delivery.next_attempt_at:
        when = f"{delivery.next_attempt_at:%H:%M:%S} UTC"
        messages.error(request, f"Test not delivered yet ({error}); it is tried again at {when}.")
    else:
        messages.error(request, f"Test not delivered ({delivery.status}): {error}")
    return redirect("webhook-detail", endpoint_id=endpoint.pk)


@require_POST
@staff_required
def webhook_secret(request, endpoint_id: int):
    endpoint = _endpoint(endpoint_id)
    services.webhook_rotate_secret(endpoint_id=endpoint.pk, by=request.user.get_username())
    messages.success(request, "New secret: deliveries are signed with it from now on.")
    return redirect("webhook-detail", endpoint_id=endpoint.pk)


@require_POST
@staff_required
def delivery_resend(request, delivery_id):
    delivery = selectors.delivery_get(delivery_id)
    if delivery is None:
        raise Http404("no such delivery")
    if services.delivery_resend(delivery_id=delivery_id, by=request.user.get_username()):
        messages.success(request, "Sent again: it is back in the queue.")
    else:
        messages.info(request, "Only a failed delivery can be sent again.")
    return redirect("webhook-detail", endpoint_id=delivery.endpoint_id)
