"""Informers, work queues, controller runner and leader election on kubernetes_asyncio."""

__all__: list[str] = []
