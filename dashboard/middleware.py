"""No NUL character reaches a dashboard view: PostgreSQL cannot hold one in text, so a `%00` in
a path, a query parameter or a form field would otherwise end in a database error (a 500).
The API checks its own inputs against its schema and answers 422 in its error shape."""

from django.shortcuts import render

API_PREFIX = "/api/"


def _has_nul(request) -> bool:
    if "\x00" in request.path:
        return True
    fields = [request.GET]
    if request.method == "POST":
        fields.append(request.POST)
    return any(
        "\x00" in key or any("\x00" in value for value in values)
        for query in fields
        for key, values in query.lists()
    )


def refuse_nul_middleware(get_response):
    def middleware(request):
        if not request.path.startswith(API_PREFIX) and _has_nul(request):
            return render(request, "400.html", status=400)
        return get_response(request)

    return middleware
