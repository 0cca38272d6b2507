"""Regenerate resource-v1.schema.json: the resource.k8s.io/v1 ResourceSlice, ResourceClaimTemplate and DeviceClass
types of the Kubernetes API, as JSON Schema, with every definition they reference and nothing else.

Source: the strict ("additionalProperties": false) schemas that kubernetes-validate 1.37.0 ships, generated
from Kubernetes v1.37.0's OpenAPI document (kubernetes/kubernetes api/openapi-spec; Apache-2.0, as is
kubernetes-validate). Run: python tests/data/dra/regen.py (with '.[test]' installed).
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate

VERSION = "v1.37.0-local-strict"
TOP = {"ResourceSlice": "resourceslice-resource-v1.json",
       "ResourceClaimTemplate": "resourceclaimtemplate-resource-v1.json",
       "DeviceClass": "deviceclass-resource-v1.json"}
REF = "/api/_definitions.json#/$defs/"


def main() -> None:
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / VERSION
    defs = json.loads((base / "_definitions.json").read_text())["$defs"]
    kept: dict = {}

    def walk(node: object) -> object:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str) and v.startswith((REF, "#/$defs/")):
                    name = v.rpartition("/")[2]
                    if name not in kept:
                        kept[name] = None
                        kept[name] = walk(defs[name])
                    out[k] = "#/$defs/" + name
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    tops = {kind: walk(json.loads((base / f).read_text())) for kind, f in TOP.items()}
    for t in tops.values():
        t.pop("$schema", None)
        t.pop("$id", None)
    doc = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "$comment": f"kubernetes-validate {VERSION}: see regen.py and tests/data/README.md",
           "oneOf": [{"$ref": f"#/$defs/{kind}"} for kind in tops],
           "$defs": {**tops, **dict(sorted(kept.items()))}}
    (Path(__file__).parent / "resource-v1.schema.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
