"""The names and versions of numatune's JSON documents: the one list of them, each documented in
docs/json-schemas.md. In the model because analysis (diff reads inspect documents), render (the envelope)
and the live layer (irq state files) all name them."""

# document kind -> schema name/version. Bump the version on any incompatible change.
SCHEMAS = {
    "inspect": "numatune.inspect/4",
    "audit": "numatune.audit/2",
    "launch": "numatune.launch/2",
    "irq": "numatune.irq/1",
    "irq-plan": "numatune.irq-plan/1",
    "irq-apply": "numatune.irq-apply/1",
    "irq-state": "numatune.irq-state/1",
    "check": "numatune.check/1",
    "diff": "numatune.diff/1",
    "fleet": "numatune.fleet/1",
    "emit": "numatune.emit/1",
    "plan-memory": "numatune.plan-memory/1",
    "probe": "numatune.probe/1",
    "compare": "numatune.compare/1",
    "bind": "numatune.bind/1",
}
