"""Device type ``service``: a queueing-theory device (`blksim.disk_models.synthetic`).

``[device] service`` is the law, ``fixed`` or ``exponential``; ``service_time`` its
(mean) service time, required; ``capacity`` the device's size (default 1t);
``servers`` the requests it serves at once (default 1); ``nr_hw_queues`` the hardware
queues it offers a multi-queue kernel (default 1), each ``queue_depth`` deep.
"""

from __future__ import annotations

from dataclasses import dataclass

from blksim.common.config_values import ConfigError, seconds_text, time_value
from blksim.disk_models.registry import DeviceType, register

SERVICE_LAWS = ("fixed", "exponential")


@dataclass
class ServiceSettings:
    """A service-law device: its law, (mean) service time in seconds and size in sectors."""

    law: str
    service_time: float
    capacity_sectors: int
    servers: int = 1
    nr_hw_queues: int = 1


def parse(device: dict, where) -> ServiceSettings:
    """The law, the time and the capacity, checked."""
    service = device["service"]
    if service not in SERVICE_LAWS:
        raise ConfigError(f"{where}: service = {service!r} is not supported; "
                          f"valid: {', '.join(SERVICE_LAWS)}")
    if "service_time" not in device:
        raise ConfigError(f"{where}: service_time is required with service")
    service_time = time_value(device, "service_time", str(where), None)
    if service_time <= 0:
        raise ConfigError(f"{where}: service_time must be positive, "
                          f"found {device['service_time']!r}")
    from blksim.common.units import parse_size
    try:
        capacity_bytes = parse_size(device.get("capacity", "1t"), "capacity")
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    capacity_sectors = capacity_bytes // 512
    if capacity_sectors < 1:
        raise ConfigError(f"{where}: capacity must be at least 512 bytes")
    from blksim.common.config_values import int_value
    servers = int_value(device, "servers", str(where), 1, 1, 4096)
    nr_hw_queues = int_value(device, "nr_hw_queues", str(where), 1, 1, 4096)
    return ServiceSettings(service, service_time, capacity_sectors, servers, nr_hw_queues)


def build(s: ServiceSettings, name: str, queue_depth: int | None, seed: int):
    """A `ServiceLawDevice` (one request at a time unless the depth says more)."""
    from blksim.disk_models.synthetic import ServiceLawDevice
    return ServiceLawDevice(s.law, s.service_time, capacity=s.capacity_sectors,
                            queue_depth=queue_depth or 1, seed=seed, servers=s.servers,
                            nr_hw_queues=s.nr_hw_queues)


def table(s: ServiceSettings, queue_depth) -> dict:
    """The law, the time, the capacity and the depth."""
    out = {"service": s.law, "service_time": seconds_text(s.service_time),
           "capacity": s.capacity_sectors * 512, "queue_depth": queue_depth}
    if s.servers != 1:
        out["servers"] = s.servers
    if s.nr_hw_queues != 1:
        out["nr_hw_queues"] = s.nr_hw_queues
    return out


TYPE = register(DeviceType(
    name="service", module=__name__, selected_by="service",
    kind_keys={
        "service": "instead of a drive, a queueing-theory device: fixed or exponential "
                   "service times",
        "service_time": "with service: the (mean) service time, e.g. \"5ms\"",
        "capacity": "with service: the device's size (default 1t)",
        "servers": "with service: requests served at once, FCFS (default 1)",
        "nr_hw_queues": "with service: hardware queues offered to a multi-queue kernel, each "
                        "queue_depth deep (default 1)",
    },
    parse=parse, build=build, table=table,
    hw_queues=lambda s: s.nr_hw_queues, rotational=lambda s: False,
    sectors=lambda s, where: s.capacity_sectors,
    rejects=lambda key: "give either drive or service, not both" if key == "drive" else None,
    misplaced=lambda key, chosen: f"{key} goes with service, which is not set"))
