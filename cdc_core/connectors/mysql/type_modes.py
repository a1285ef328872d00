"""The Debezium handling modes a MySQL/MariaDB connector maps its column types with."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_core.config.connector_config import ConnectorConfig


@dataclass(frozen=True)
class TypeModes:
    """The Debezium handling modes (defaults as in Debezium's MySQL connector)."""

    decimal: str = "precise"  # precise | string | double
    bigint_unsigned: str = "long"  # long | precise
    time_precision: str = (
        "adaptive_time_microseconds"  # | adaptive | connect | isostring | microseconds | nanoseconds
    )
    binary: str = "bytes"  # bytes | base64 | base64-url-safe | hex
    # The server: Debezium's MariaDB connector maps a few types unlike its MySQL connector
    # (JSON as a plain string).
    flavor: str = "mysql"  # mysql | mariadb

    @classmethod
    def from_config(cls, config: ConnectorConfig, flavor: str = "mysql") -> TypeModes:
        """The connector's modes: the streamer and the Spark chunk job map alike."""
        return cls(
            decimal=config.get("decimal.handling.mode"),
            bigint_unsigned=config.get("bigint.unsigned.handling.mode"),
            time_precision=config.get("time.precision.mode"),
            binary=config.get("binary.handling.mode"),
            flavor=flavor,
        )
