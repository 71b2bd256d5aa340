"""Dashboard views, one module per page family (issue 5). Views stay thin: parse the request,
make one call into selectors/services, render."""
