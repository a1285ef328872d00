"""A small shop schema, the history it holds before capture starts, and a write workload
that exercises what the streamer must handle: inserts, updates, deletes, multi-table
transactions, a primary-key change, and a schema change in the middle of the traffic.

Every INSERT names its key first and gives it explicitly (the next id after the largest,
as a Vitess sequence would), so the same workload runs on one MariaDB and, routed by its
first value, on a sharded Vitess keyspace (`demo/sharded.py`)."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

SCHEMA = [
    """CREATE TABLE customers (
        id INT PRIMARY KEY AUTO_INCREMENT,
        email VARCHAR(120) NOT NULL UNIQUE,
        name VARCHAR(80) CHARACTER SET utf8mb4 NOT NULL,
        tier ENUM('bronze','silver','gold') NOT NULL DEFAULT 'bronze',
        created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
    )""",
    """CREATE TABLE products (
        sku VARCHAR(20) PRIMARY KEY,
        title VARCHAR(200) NOT NULL,
        price DECIMAL(10,2) NOT NULL,
        attributes JSON NULL
    )""",
    """CREATE TABLE orders (
        id BIGINT UNSIGNED PRIMARY KEY AUTO_INCREMENT,
        customer_id INT NOT NULL,
        status ENUM('new','paid','shipped','cancelled') NOT NULL,
        total DECIMAL(12,2) NOT NULL,
        placed_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
    )""",
    """CREATE TABLE order_lines (
        order_id BIGINT UNSIGNED NOT NULL,
        line_no SMALLINT NOT NULL,
        sku VARCHAR(20) NOT NULL,
        qty INT NOT NULL,
        PRIMARY KEY (order_id, line_no)
    )""",
]

NAMES = ["Zoë", "Ana", "Bjørn", "Chidi", "Dmitri", "Élodie", "Fatima", "Göran", "Hiro", "Ines"]


def create_schema(conn: Any, database: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{database}`")
        for statement in SCHEMA:
            cur.execute(statement)


def seed_history(conn: Any, database: str, orders: int = 100, seed: int = 3) -> dict[str, int]:
    """What the shop holds before capture starts: the catalog (40 customers, 25 products)
    and `orders` orders. The streamer never sees these inserts; a snapshot brings them."""
    rng = random.Random(seed)
    conn.autocommit(False)
    stats = {"transactions": 0}
    with conn.cursor() as cur:
        cur.execute(f"USE `{database}`")
        for i in range(40):
            cur.execute(
                "INSERT INTO customers (id, email, name, tier) VALUES (%s, %s, %s, %s)",
                (i + 1, f"user{i}@example.com", rng.choice(NAMES), rng.choice(["bronze", "silver", "gold"])),
            )
        for i in range(25):
            cur.execute(
                "INSERT INTO products VALUES (%s, %s, %s, %s)",
                (
                    f"SKU-{i:03d}",
                    f"Product {i}",
                    Decimal(rng.randint(100, 99999)) / 100,
                    f'{{"color": "c{i % 5}"}}',
                ),
            )
        conn.commit()
        stats["transactions"] += 1
        for order_id in range(1, orders + 1):
            _place_order(cur, rng, order_id)
            conn.commit()
            stats["transactions"] += 1
    conn.autocommit(True)
    return stats


def run_workload(conn: Any, database: str, orders: int = 300, seed: int = 7) -> dict[str, int]:
    """Live traffic on a seeded shop, with autocommit off so each business action is one
    transaction: new orders (multi-table), shipping and cancellations, updates of rows
    placed before capture, an ALTER TABLE and a primary-key change in the middle, and a
    deleted customer."""
    rng = random.Random(seed)
    conn.autocommit(False)
    stats = {"transactions": 0}
    with conn.cursor() as cur:
        cur.execute(f"USE `{database}`")
        cur.execute("UPDATE orders SET status = 'shipped' WHERE status = 'paid' AND id <= 10")
        conn.commit()
        stats["transactions"] += 1
        first = _largest(cur, "orders", "id") + 1
        for n in range(orders):
            order_id = _place_order(cur, rng, first + n)
            conn.commit()
            stats["transactions"] += 1
            if n % 7 == 3:
                cur.execute("UPDATE orders SET status = 'shipped' WHERE id = %s", (order_id,))
                conn.commit()
                stats["transactions"] += 1
            if n % 11 == 5:
                cur.execute("DELETE FROM order_lines WHERE order_id = %s", (order_id,))
                cur.execute("UPDATE orders SET status = 'cancelled', total = 0 WHERE id = %s", (order_id,))
                conn.commit()
                stats["transactions"] += 1
            if n == orders // 2:
                # A schema change in the middle of the traffic, and a primary-key change.
                cur.execute("ALTER TABLE customers ADD COLUMN phone VARCHAR(30) NULL AFTER email")
                cur.execute("UPDATE customers SET phone = '+1-555-0100' WHERE id <= 5")
                cur.execute("UPDATE products SET sku = 'SKU-RENAMED' WHERE sku = 'SKU-000'")
                conn.commit()
                stats["transactions"] += 1
        cur.execute("DELETE FROM customers WHERE id = 40")
        conn.commit()
        stats["transactions"] += 1
    conn.autocommit(True)
    return stats


def _largest(cur: Any, table: str, column: str) -> int:
    """The largest value of a column (0 for none): on a sharded keyspace, of every shard."""
    cur.execute(f"SELECT MAX(`{column}`) FROM `{table}`")
    return max((row[0] for row in cur.fetchall() if row[0] is not None), default=0)


def _place_order(cur: Any, rng: random.Random, order_id: int) -> int:
    """One paid order of 1-4 lines (the caller commits); its id."""
    customer = rng.randint(1, 40)
    lines = rng.randint(1, 4)
    total = Decimal(0)
    cur.execute(
        "INSERT INTO orders (id, customer_id, status, total) VALUES (%s, %s, 'new', 0)", (order_id, customer)
    )
    for line in range(1, lines + 1):
        qty = rng.randint(1, 5)
        sku = f"SKU-{rng.randint(0, 24):03d}"
        cur.execute("INSERT INTO order_lines VALUES (%s, %s, %s, %s)", (order_id, line, sku, qty))
        total += qty * Decimal("9.99")
    cur.execute("UPDATE orders SET total = %s, status = 'paid' WHERE id = %s", (total, order_id))
    return order_id
