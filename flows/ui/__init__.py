"""``flows ui``: one HTTP process serving the REST API (:mod:`flows.ui.api`, JSON under
``/api/v1/``, OpenAPI at ``/api/v1/openapi.json``), server-sent events (:mod:`flows.ui.events`)
and Prometheus metrics (:mod:`flows.ui.metrics`), with token auth (:mod:`flows.ui.auth`; the
request context and its auth dependencies in :mod:`flows.ui.state`).
:func:`flows.ui.app.create_app` builds it; pages are added there as routers.
"""
