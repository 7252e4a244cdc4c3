"""Before any launch: the space's engine, and everything the space can produce checked against it (names,
values, conditions, enqueued trials, the baseline, streams against the server's running limit, the port)."""

from __future__ import annotations

from sweep.core.errors import UserError
from sweep.engines import Engine, ServerSetup, engine_class
from sweep.launch.server import ensure_port_free
from sweep.space import Space


def build_engine(space: Space) -> Engine:
    """The space's engine with its launcher and model resolved (the embedded ones by default)."""
    cls = engine_class(space.engine)
    server = space.server
    launcher = list(server.launcher) or cls.default_launcher(server.binary)
    model = cls.resolve_model(server.model)
    return cls(
        ServerSetup(launcher=launcher, model=model, extra_args=list(server.extra_args), host=server.host)
    )


def validate(space: Space, engine: Engine) -> None:
    """Check every name and value the space can produce before anything is launched."""
    engine.prepare()
    for name, value in space.fixed.items():
        engine.check_value(name, value)
    names = set(space.fixed)
    for spec in space.params:
        if spec.name in space.fixed:
            raise UserError(
                f"'{spec.name}' is both fixed and swept", "remove it from one of `fixed:` and `params:`"
            )
        for value in spec.values():
            if value is not None:  # null: the flag left out
                engine.check_value(spec.name, value)
        for cond in (*spec.when, *spec.when_not):
            if cond not in names:
                raise UserError(
                    f"params.{spec.name}: its condition names '{cond}', which comes nowhere before it",
                    "a condition may only name a fixed parameter or one swept above it",
                )
        names.add(spec.name)
    specs = {spec.name: spec for spec in space.params}
    for params in space.enqueue:
        for name, value in params.items():
            if name not in specs:
                raise UserError(
                    f"enqueue: '{name}' is not a swept parameter",
                    f"add params.{name} (or drop it from enqueue)",
                )
            if not specs[name].contains(value):
                raise UserError(
                    f"enqueue: {name} = {value} is outside params.{name}",
                    f"widen params.{name} to include it",
                )
    for params in (engine.baseline_params(), *space.enqueue):
        engine.check_params(space.launch_params(params))
    _check_streams(space, engine)
    if space.server.port:
        ensure_port_free(space.server.host, space.server.port)


def _check_streams(space: Space, engine: Engine) -> None:
    """A workload's streams must all be decoded at once: more than the server's limit would queue and measure a
    lower concurrency than its name says. Checked for the baseline and one configuration of each method (where
    the flags decide the limit and the space does not sweep it)."""
    widest = max(space.workloads, key=lambda w: w.streams)
    swept = {spec.name for spec in space.params}
    for params in (engine.baseline_params(), *space.covering()):
        limit = engine.running_limit(engine.derive(space.launch_params(params)))
        if limit and limit.param not in swept and widest.streams > limit.requests:
            raise UserError(
                f"workload {widest.key} sends {widest.streams} requests at once, but {limit.why} decodes at most "
                f"{limit.requests}: the rest would queue",
                f"set `{limit.param}: {widest.streams}` under fixed: (or lower the workload's streams)",
            )
