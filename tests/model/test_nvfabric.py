"""NVML fabric health mask and domain names (model.nvfabric): nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* layout."""

from __future__ import annotations

from numatune.model.nvfabric import dashed_uuid, decode_health, domain_label, health_problems
from numatune.model.nvfleet import natural


def test_every_field_false_is_healthy():
    assert decode_health(0x1AA) == {"degraded_bandwidth": "false", "route_recovery": "false",
                                    "route_unhealthy": "false", "access_timeout_recovery": "false",
                                    "incorrect_configuration": "none"}
    assert health_problems(0x1AA, "healthy") == []
    # 0xaa, the mask quoted in NVIDIA/nccl#2186: "false" in every 2-bit field, configuration not supported
    assert health_problems(0xAA) == [] and decode_health(0xAA)["incorrect_configuration"] == "not supported"


def test_fields_that_are_true_are_named():
    assert health_problems(0x1A9) == ["degraded bandwidth (NVLink paths down)"]
    assert health_problems(0x1A6) == ["route recovery in progress"]
    assert health_problems(0x19A) == ["route unhealthy"]
    assert health_problems(0x16A) == ["access-timeout recovery in progress"]
    assert health_problems(0x5AA) == ["incorrect configuration: insufficient NVLinks"]
    assert decode_health(0xFAA)["incorrect_configuration"] == "value 15"
    assert health_problems(None, "unhealthy") == ["health summary unhealthy"]
    assert decode_health(None) == {} and health_problems(None) == []


def test_domain_names():
    hex32 = "5c0de0005c0de0005c0de0005c0de000"
    assert dashed_uuid(hex32) == "5c0de000-5c0d-e000-5c0d-e0005c0de000"
    assert domain_label(hex32, 32766) == "5c0de000-5c0d-e000-5c0d-e0005c0de000.32766"
    assert domain_label("0" * 32, 0) is None and domain_label(hex32, None) is None
    assert dashed_uuid("not hex") is None and dashed_uuid("G" * 32) is None


def test_natural_order():
    assert sorted(["n10", "n9", "n09x", "m1"], key=natural) == ["m1", "n9", "n09x", "n10"]
    assert sorted(["a" + "9" * 60, "a1"], key=natural) == ["a1", "a" + "9" * 60]  # no int() of a long number
