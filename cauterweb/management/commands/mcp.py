"""`cauterweb mcp`: the rule tool as an MCP server (semantics §4, §5), over stdio by default
or streamable HTTP with --http."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from cauterweb.mcp_server import NoToken, build_server, stdio_caller


class Command(BaseCommand):
    # The server an agent starts answers as soon as it can: no system checks (the web
    # stack's URLs and API, which it does not serve), as for the JSON commands.
    requires_system_checks = []
    help = (
        "Serve the rule tool over MCP. stdio (default): the agent token in CAUTERWEB_AGENT_TOKEN. "
        "--http: streamable HTTP on /mcp, a bearer agent token on every request."
    )

    def add_arguments(self, parser):
        parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument(
            "--public-url",
            help="the URL clients reach this server at (default http://HOST:PORT)",
        )

    def handle(self, *args, **options):
        if not options["http"]:
            try:
                caller = stdio_caller()
            except NoToken as exc:
                raise CommandError(str(exc)) from None
            # stdout is the protocol channel: nothing else may be written to it.
            build_server(caller=caller).run("stdio")
            return
        import uvicorn

        public_url = options["public_url"] or f"http://{options['host']}:{options['port']}"
        app = build_server(public_url=public_url).streamable_http_app(host=options["host"])
        self.stderr.write(f"MCP rule tool on {public_url}/mcp (bearer agent token required)")
        level = settings.LOGGING["loggers"]["cauterweb"]["level"].lower()
        uvicorn.run(app, host=options["host"], port=options["port"], log_level=level)
