"""The Jupyter server extension: builds the queue from the ``E31`` config and serves its API."""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_server.extension.application import ExtensionApp
from traitlets import TraitError

from .. import backends, gpus
from ..errors import E31Error
from ..job import parse_duration
from ..cluster_queue import ClusterQueue
from ..queue import Queue
from ..settings import Settings
from .config import E31
from .events import JobEvents
from .handlers import routes


class E31Extension(ExtensionApp):
    name = "e31_jupyter"
    classes = [E31]

    def initialize_settings(self):
        try:
            config = E31(parent=self)
        except (TraitError, ValueError) as error:  # a setting's validator: its message says what to set
            self.log.critical("e31: %s", error)
            raise SystemExit(1) from None
        inventory = list(config.gpus) if config.gpus is not None else gpus.discover()
        settings = Settings(
            inventory=inventory,
            default_max_runtime_s=parse_duration(config.default_max_runtime, "default_max_runtime"),
            gpu_hour_rate=config.gpu_hour_rate,
            currency=config.currency,
            grace_s=config.stop_grace,
            policy=config.policy,
            long_jobs_share=config.long_jobs_share,
            max_queued_per_user=config.max_queued_per_user,
            max_gpus_per_user=config.max_gpus_per_user or None,
            max_input_bytes=config.max_input_bytes,
            max_output_bytes=config.max_output_bytes,
            delete_files_after_s=(
                parse_duration(config.delete_files_after, "delete_files_after") if config.delete_files_after else None
            ),
            jobs_run_as=config.jobs_run_as,
            job_env=list(config.job_env),
        )
        try:
            backend = backends.create(config.backend, **config.backend_settings())
            if getattr(backend, "schedules", False):  # Slurm: the cluster decides what runs
                if settings.max_gpus_per_user is not None:
                    raise E31Error(
                        "c.E31.max_gpus_per_user is for queues e31 schedules (backends local and docker); with "
                        "Slurm the cluster decides what runs. Set the limit in Slurm (MaxTRESPerUser=gres/gpu=N "
                        "on the QOS jobs run in, c.E31.slurm_qos) and remove c.E31.max_gpus_per_user."
                    )
                settings.inventory = None
                self.e31_queue = ClusterQueue(Path(config.data_dir), backend, settings)
            else:
                self.e31_queue = Queue(Path(config.data_dir), backend, settings)
        except E31Error as error:
            # Without its queue the server would only pretend to accept jobs: stop, and say why.
            self.log.critical("e31: %s", error.message)
            raise SystemExit(1) from None
        self.e31_events = JobEvents(self.e31_queue, self.serverapp.event_logger)
        self.settings.update(
            e31_queue=self.e31_queue,
            e31_events=self.e31_events,
            e31_admin_users=set(config.admin_users),
            e31_gpu_source="configured" if config.gpus is not None else "nvml",
        )
        self.log.info("e31: queue in %s, backend %s, GPUs %s", config.data_dir, config.backend, inventory)

    def initialize_handlers(self):
        self.handlers.extend(routes())

    async def _start_jupyter_server_extension(self, serverapp):
        await self.e31_queue.start()
        self.e31_events.start()
        # Kernels (and terminals) this server starts inherit its environment: this is how
        # %%e31 and the e31 command inside them find the queue without any setup.
        os.environ["E31_URL"] = serverapp.connection_url
        os.environ["E31_TOKEN"] = serverapp.identity_provider.token or ""

    async def stop_extension(self):
        await self.e31_events.stop()
        await self.e31_queue.stop()
