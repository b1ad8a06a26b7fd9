"""The joint MILP, one decision family per module; ``build_model`` is its table of contents."""

from __future__ import annotations

import time

import pyomo.environ as pyo

from optnet.model import (
    changes,
    circuits,
    collectives,
    cross_job,
    lightpaths,
    objective,
    offers,
    placement,
    reconfiguration,
    relay,
    tenants,
    time_average,
    wavelength_switching,
)
from optnet.model.data import ModelData, model_data

__all__ = ["FAMILIES", "ModelData", "build_model", "model_data"]

#: The model in the order of docs/model.md §5: (name, function).
FAMILIES = (
    ("placement variables", placement.add_placement_variables),
    ("one rack per slot", placement.add_one_rack_per_slot),
    ("rack capacity", placement.add_rack_capacity),
    ("rack order", placement.add_rack_order),
    ("degraded servers", placement.add_degraded_servers),
    ("pair racks", placement.add_pair_racks),
    ("circuit variables", circuits.add_circuit_variables),
    ("port matching", circuits.add_port_matching),
    ("lightpath variables", lightpaths.add_lightpath_variables),
    ("lightpath rack pair", lightpaths.add_lightpath_rack_pair),
    ("transceiver limit", lightpaths.add_transceiver_limit),
    ("matching cut", lightpaths.add_matching_cut),
    ("wavelength capacity", lightpaths.add_wavelength_capacity),
    ("lightpath count", lightpaths.add_lightpath_count),
    ("rack port cuts", lightpaths.add_rack_port_cuts),
    ("ws variables", wavelength_switching.add_ws_variables),
    ("ws count", wavelength_switching.add_ws_count),
    ("ws channel limit", wavelength_switching.add_ws_channel_limit),
    ("ws attachment", wavelength_switching.add_ws_attachment),
    ("transport variables", offers.add_transport_variables),
    ("one transport", offers.add_one_transport),
    ("hybrid choice", lightpaths.add_hybrid_choice),
    ("hybrid choice per phase", lightpaths.add_hybrid_choice_per_phase),
    ("collective variables", collectives.add_collective_variables),
    ("algorithm choice", collectives.add_algorithm_choice),
    ("pair latency", collectives.add_pair_latency),
    ("pair bandwidth", collectives.add_pair_bandwidth),
    ("ws latency", wavelength_switching.add_ws_latency),
    ("ws bandwidth", wavelength_switching.add_ws_bandwidth),
    ("transport offers", offers.add_transport_offers),
    ("relay variables", relay.add_relay_variables),
    ("relay choice", relay.add_relay_choice),
    ("relay exclusive hops", relay.add_relay_exclusive_hops),
    ("connectivity", collectives.add_connectivity),
    ("relay connectivity", relay.add_relay_connectivity),
    ("step time", collectives.add_step_time),
    ("relay step time", relay.add_relay_step_time),
    ("shared NIC", collectives.add_shared_nic),
    ("packet share", collectives.add_packet_share),
    ("cross-job flows", cross_job.add_cross_job_flows),
    ("shared step time", collectives.add_shared_step_time),
    ("collective time", collectives.add_collective_time),
    ("pipelined floor", collectives.add_pipelined_floor),
    ("collective lower bound", collectives.add_collective_lower_bound),
    ("reconfiguration", reconfiguration.add_reconfiguration),
    ("iteration time", objective.add_iteration_time),
    ("iteration floor", objective.add_iteration_floor),
    ("iteration budget", objective.add_iteration_budget),
    ("tenant guarantees", tenants.add_tenant_guarantees),
    ("objective", objective.add_objective),
    ("time-average links", time_average.add_time_average_links),
    ("change count", changes.add_change_count),
)


def build_model(md: ModelData) -> tuple[pyo.ConcreteModel, dict[str, float]]:
    """Build the joint MILP; returns the model and the build time of each family (s)."""
    m = pyo.ConcreteModel(name="optnet")
    times: dict[str, float] = {}
    for name, add in FAMILIES:
        t0 = time.perf_counter()
        add(m, md)
        times[name] = time.perf_counter() - t0
    return m, times
