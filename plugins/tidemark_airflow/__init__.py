"""Airflow integration laid out like a provider: hooks, operators, sensors, triggers and
the status page. Airflow puts the plugins folder on `sys.path`, so DAGs import it as
`tidemark_airflow`.
"""
