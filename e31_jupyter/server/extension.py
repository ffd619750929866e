"""The Jupyter server extension: builds the queue from the ``E31`` config and serves its API."""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_server.extension.application import ExtensionApp
from traitlets import TraitError

from e31_jupyter.core.errors import E31Error
from e31_jupyter.core.gpu_use import WatchRules
from e31_jupyter.core.job import parse_duration
from e31_jupyter.core.policies import DEFAULT_POLICY, PREEMPTING
from e31_jupyter.execution import accounts, backends, gpus
from e31_jupyter.server.config import E31
from e31_jupyter.server.events import JobEvents
from e31_jupyter.server.forward import SystemScheduler
from e31_jupyter.server.forward import routes as forward_routes
from e31_jupyter.server.handlers import SINGLE_USER_PROVIDERS, routes, unavailable_routes
from e31_jupyter.service.queue import Queue
from e31_jupyter.service.settings import Settings


class E31Extension(ExtensionApp):
    name = "e31_jupyter"
    classes = [E31]

    e31_queue: Queue | None = None
    e31_events: JobEvents | None = None  # made with e31_queue
    e31_unavailable = ""  # why the queue could not start; the API then answers 503 with it

    def initialize_settings(self):
        try:
            config = E31(parent=self)
        except (TraitError, ValueError) as error:  # a setting's validator: its message says what to set
            self._unavailable(str(error))
            return
        if config.scheduler_socket:
            self.settings.update(e31_scheduler=SystemScheduler(config.scheduler_socket))
            self.log.info("e31: the queue is the system scheduler's at %s", config.scheduler_socket)
            return
        try:
            self.e31_queue = self._make_queue(config)
        except E31Error as error:
            self._unavailable(error.message)
            return
        except OSError as error:  # a folder or file the server may not touch, say
            self._unavailable(
                f"{error.strerror or error} ({error.filename or config.data_dir}). Fix its owner or permissions, "
                "or point c.E31.data_dir at a folder of your own."
            )
            return
        assert self.serverapp is not None  # the server sets it before it asks for our settings
        self.e31_events = JobEvents(self.e31_queue, self.serverapp.event_logger)
        self.settings.update(
            e31_queue=self.e31_queue,
            e31_events=self.e31_events,
            e31_admin_users=set(config.admin_users),
            e31_admin_group=config.admin_group,
            e31_system=config.system,
            e31_gpu_source="configured" if config.gpus is not None else "nvml",
        )
        self.log.info(
            "e31: queue in %s, backend %s, GPUs %s", config.data_dir, config.backend, self.e31_queue.settings.inventory
        )

    def _make_queue(self, config: E31) -> Queue:
        if config.system and not accounts.can_switch_user():
            raise E31Error(
                "c.E31.system: the system scheduler runs as root, so that it can start each job as the user "
                "who submitted it. Start it as root (`sudo e31 serve --system`), or leave c.E31.system off for "
                "a queue of your own."
            )
        assert self.serverapp is not None  # the server sets it before it asks for our settings
        inventory = list(config.gpus) if config.gpus is not None else gpus.discover()
        settings = Settings(
            inventory=inventory,
            default_max_runtime_s=parse_duration(config.default_max_runtime, "default_max_runtime"),
            gpu_hour_rate=config.gpu_hour_rate,
            currency=config.currency,
            grace_s=config.stop_grace,
            suspend_grace_s=config.suspend_grace,
            policy=_policy(config),
            long_jobs_share=config.long_jobs_share,
            max_queued_per_user=config.max_queued_per_user,
            max_gpus_per_user=config.max_gpus_per_user or None,
            max_input_bytes=config.max_input_bytes,
            max_output_bytes=config.max_output_bytes,
            delete_files_after_s=(
                parse_duration(config.delete_files_after, "delete_files_after") if config.delete_files_after else None
            ),
            system=config.system,
            many_users=config.system or type(self.serverapp.identity_provider) not in SINGLE_USER_PROVIDERS,
            jobs_run_as=config.jobs_run_as,
            job_env=list(config.job_env),
            checkpoint_default=config.checkpoint_default,
            checkpoint_share=config.checkpoint_share,
            gpu_watch=WatchRules(
                sample_s=config.gpu_sample_s,
                idle_below_pct=config.idle_gpu_threshold,
                idle_after_s=parse_duration(config.idle_gpu_after, "idle_gpu_after"),
                release_idle=config.idle_gpu_action == "release",
                outside_memory_bytes=config.outside_gpu_memory_mib << 20,
            ),
        )
        backend = backends.create(config.backend, **config.backend_settings())
        if config.backend in backends.CLUSTER_BACKENDS:  # Slurm: the cluster decides what runs
            if settings.max_gpus_per_user is not None:
                raise E31Error(
                    "c.E31.max_gpus_per_user is for queues e31 schedules (backends local and docker); with "
                    "Slurm the cluster decides what runs. Set the limit in Slurm (MaxTRESPerUser=gres/gpu=N "
                    "on the QOS jobs run in, c.E31.slurm_qos) and remove c.E31.max_gpus_per_user."
                )
            settings.inventory = None
        return Queue(Path(config.data_dir), backend, settings, backend_name=config.backend)

    def _unavailable(self, reason: str) -> None:
        """Without its queue the server would only pretend to accept jobs: `e31 serve` stops and
        says why; a JupyterLab that has other work goes on, and its e31 API answers 503 with why."""
        self.log.critical("e31: %s", reason)
        assert self.serverapp is not None  # the server sets it before it asks for our settings
        if self.serverapp.reraise_server_extension_failures:
            raise SystemExit(1)
        self.e31_unavailable = reason

    def initialize_handlers(self):
        if self.e31_unavailable:
            self.handlers.extend(unavailable_routes(self.e31_unavailable))
        elif "e31_scheduler" in self.settings:
            self.handlers.extend(forward_routes())
        else:
            self.handlers.extend(routes())

    async def _start_jupyter_server_extension(self, serverapp):
        if self.e31_queue is not None:
            await self.e31_queue.start()
            assert self.e31_events is not None  # made with the queue
            self.e31_events.start()
        if not self.settings.get("e31_system"):
            # Kernels (and terminals) this server starts inherit its address, which is how %%e31
            # and the e31 command inside them find the queue without any setup. Never its token:
            # the client reads that from the server's runtime file, which only this user can read.
            os.environ["E31_URL"] = serverapp.connection_url
            os.environ.pop("E31_TOKEN", None)

    async def stop_extension(self):
        if self.e31_queue is not None:
            assert self.e31_events is not None  # made with the queue
            await self.e31_events.stop()
            await self.e31_queue.stop()


def _policy(config: E31) -> str:
    """c.E31.policy, its preempting form when c.E31.preempt asks for one."""
    if config.preempt and config.backend == "slurm":
        raise E31Error(
            "c.E31.preempt: with the slurm backend Slurm decides which job runs, and e31 does not suspend "
            "jobs for others. Leave c.E31.preempt off (Slurm's own preemption is its admin's to set)."
        )
    if not config.preempt or config.policy == PREEMPTING:
        return config.policy
    if config.policy != DEFAULT_POLICY:
        raise E31Error(
            f"c.E31.preempt works with the {DEFAULT_POLICY} policy, and c.E31.policy is {config.policy}. Set "
            f"c.E31.policy = '{DEFAULT_POLICY}', or leave c.E31.preempt off."
        )
    return PREEMPTING
