"""What a pool card and the "Scheduling & access" section show, from the configurator's UI state
(see `layout_state`).

`pool_view(state, pos)` gives the values, the options of every picker (only what
the catalog offers in the state's region, plus a loaded value it does not, so
validation can name it), what is disabled or hidden, and one line per reason a
machine, accelerator or accelerator count is missing (not offered in the region; past end of
support).
`access_view(state)` gives the section's values and strategy choices. The widgets
render these and nothing else.
"""

from __future__ import annotations

from typing import Any

from jupyter_ext import catalog, scheduling, validate
from jupyter_ext.spec import POOL_ROLES

from .layout_state import PARAMETER_SERVER, REDUCTION_SERVER, offered_counts, offered_in, reducer_suggestion

MODES = (("Parameter servers", PARAMETER_SERVER), ("Reduction Server", REDUCTION_SERVER))
POOL_TITLES = tuple(role.capitalize() for role in POOL_ROLES)
STRATEGY_OPTIONS = (("default (STANDARD)", ""), *((name, name) for name in scheduling.STRATEGIES))


def machine_options(include_tpu: bool = True, region: str | None = None) -> list[tuple[str, str]]:
    """(label, name) of every training machine offered in `region`, family by family in the catalog's order."""
    return [(m.label, m.name) for ms in catalog.families().values() for m in ms
            if (include_tpu or m.kind != "tpu") and offered_in(region, m.name)]


def accelerator_type_options(machine_name: str, region: str | None = None) -> list[tuple[str, str]]:
    """What catalog.valid_accelerators offers, less what `region` does not and what is past end of
    support; "None" where the machine may run without one."""
    machine = catalog.machine(machine_name)
    offered = catalog.valid_accelerators(machine_name)
    none = [("None", "")] if not offered or (machine is not None and machine.kind == "cpu") else []
    return none + [(_accelerator_label(a), a) for a in offered
                   if not catalog.is_deprecated(a) and offered_in(region, machine_name, a)]


def missing_notes(region: str | None, machine_name: str, include_tpu: bool = True) -> list[str]:
    """Why pickers lack something: accelerators `region` does not offer (with the machines they
    hide), counts of this machine's accelerators it does not offer (TPU Pod slices where it offers
    single hosts only), and this machine's accelerators past end of support."""
    hidden: dict[str, list[str]] = {}
    slices: list[str] = []
    if region and region in catalog.training_regions():
        for m in catalog.machines():
            if (include_tpu or m.kind != "tpu") and not offered_in(region, m.name):
                hidden.setdefault(catalog.implied_accelerator(m.name), []).append(m.name)
        for accel, counts in catalog.valid_accelerators(machine_name).items():
            if not offered_in(region, machine_name, accel):
                hidden.setdefault(accel, [])
            elif refused := [str(c) for c in counts if c not in offered_counts(machine_name, accel, region)]:
                slices.append(f"{catalog.accelerator_label(accel)} Pod slices ({_span(refused)} cores; only a "
                              "single host is offered)")
    notes = []
    if hidden or slices:
        parts = [catalog.accelerator_label(a) + (f" ({_span(names)})" if names else "")
                 for a, names in hidden.items()] + slices
        notes.append(f"Not offered for training in {region}: {', '.join(parts)} (region data of "
                     f"{catalog.region_data_age()}; see the README)")
    for accel in catalog.valid_accelerators(machine_name):
        if catalog.is_deprecated(accel):
            when = catalog.end_of_support(accel)
            notes.append(f"{catalog.accelerator_label(accel)} is not offered: past end of support"
                         + (f" ({when})" if when else ""))
    return notes


def _span(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"


def accelerator_count_options(machine_name: str, accelerator: str, region: str | None = None) -> list[tuple[str, int]]:
    """The counts of `accelerator` on the machine that `region` offers (layout_state.offered_counts)."""
    if not accelerator:
        return [("-", 0)]
    return [(str(c), c) for c in offered_counts(machine_name, accelerator, region)]


def topology_options(machine_name: str) -> list[tuple[str, str]]:
    machine = catalog.machine(machine_name)
    topologies = machine.tpu_topologies if machine else {}
    return [(f"{t} — {chips} chips, {vms} VM{'s' if vms != 1 else ''}", t) for t, (chips, vms) in topologies.items()]


def _accelerator_label(name: str) -> str:
    label = catalog.accelerator_label(name)
    return f"{label} (deprecated)" if catalog.is_deprecated(name) else label


def _with_current(options: list[tuple[str, Any]], current: Any, label: str) -> list[tuple[str, Any]]:
    """A loaded value the catalog does not offer stays visible (validation says what is wrong)."""
    if any(value == current for _, value in options):
        return options
    return options + [(label, current)]


def pool_view(state: dict[str, Any], pos: int) -> dict[str, Any]:
    """Everything a pool card shows: values, options, what is disabled or hidden."""
    pool = state["pools"][pos]
    machine = catalog.machine(pool["machine_type"])
    tpu_job = catalog.is_tpu_machine(state["pools"][0]["machine_type"])
    active = pos == 0 or pool["enabled"]
    reducer = pos == 2 and pool["mode"] == REDUCTION_SERVER
    fixed = machine.fixed_accelerator if machine else None
    accel, count = pool["accelerator_type"], pool["accelerator_count"]
    topologies = topology_options(pool["machine_type"])
    title = "Reduction Server" if reducer else POOL_TITLES[pos]
    return {
        "pos": pos, "title": f"{pos} · {title}", "enabled": active,
        # a TPU job has one pool: other pools may only be switched off
        "toggle_disabled": pos == 0 or (tpu_job and not pool["enabled"]),
        "mode": pool["mode"] if pos == 2 else None,
        "replica_count": pool["replica_count"], "replicas_disabled": pos == 0,
        "machine_type": pool["machine_type"],
        "machine_options": _with_current(machine_options(include_tpu=pos == 0, region=state["region"]),
                                         pool["machine_type"], pool["machine_type"] or "(none)"),
        "accelerator_type": accel,
        "accelerator_type_options": _with_current(accelerator_type_options(pool["machine_type"], state["region"]),
                                                  accel, _accelerator_label(accel)),
        "missing": missing_notes(state["region"], pool["machine_type"], include_tpu=pos == 0),
        "accelerator_count": count,
        "accelerator_count_options": _with_current(
            accelerator_count_options(pool["machine_type"], accel, state["region"]), count, str(count)),
        "accelerators_fixed": fixed is not None and (accel, count) == fixed,
        "tpu_topology": pool["tpu_topology"],
        "topology_options": _with_current(topologies, pool["tpu_topology"], pool["tpu_topology"] or "(none)"),
        "show_topology": bool(topologies or pool["tpu_topology"]),
        "image": state["image"] if pos == 0 else pool["image"],
        "image_placeholder": catalog.reduction_server_image(state["region"]) if reducer else state["image"],
        "image_disabled": reducer,
        "boot_disk_type": pool["boot_disk_type"],
        "boot_disk_type_options": _with_current([(t, t) for t in validate.BOOT_DISK_TYPES], pool["boot_disk_type"],
                                                pool["boot_disk_type"] or "(none)"),
        "boot_disk_size_gb": pool["boot_disk_size_gb"],
        "suggestion": reducer_suggestion(state)[1] if reducer and active else "",
    }


def access_view(state: dict[str, Any]) -> dict[str, Any]:
    """What the "Scheduling & access" section shows: its values (a reservation of None shows empty,
    with a placeholder saying the pools differ) and the strategy choices (plus a loaded deprecated one)."""
    access = state["access"]
    values = {key: "" if value is None else value for key, value in access.items()}
    return {"values": values,
            "strategy_options": _with_current(list(STRATEGY_OPTIONS), access["strategy"], access["strategy"]),
            "reservation_placeholder": "the pools use different reservations" if access["reservation"] is None
            else "ANY, NONE or projects/P/zones/Z/reservations/NAME"}
