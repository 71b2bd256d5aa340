from lifecycle.management.base import JsonCommand
from lifecycle.services.webhooks import deliver_due


class Command(JsonCommand):
    help = (
        "Attempt every webhook delivery that is due: retries whose back-off has passed, and "
        "deliveries a broker outage left behind (docs/webhooks.md). With a broker, Celery beat "
        "does this every CAUTERWEB_WEBHOOK_SWEEP_S; on the embedded default run it from cron."
    )

    def handle(self, *args, **options):
        counts = deliver_due()
        self.emit(
            counts,
            f"{counts['attempted']} attempted: {counts['delivered']} delivered, "
            f"{counts['retrying']} to retry, {counts['failed']} failed",
        )
