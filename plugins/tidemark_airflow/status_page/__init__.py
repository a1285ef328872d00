"""The Tidemark status page: a FastAPI app the Airflow plugin in `plugins/` mounts in the
api-server, with an HTML page and the same report as JSON. `report` gathers what each
connector's own state says, `html` renders it, `app` serves both to signed-in users.
"""
