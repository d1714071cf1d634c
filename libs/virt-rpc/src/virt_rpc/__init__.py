"""Handler <-> launcher gRPC protocol, generated with betterproto2 for grpclib."""

__all__: list[str] = []
