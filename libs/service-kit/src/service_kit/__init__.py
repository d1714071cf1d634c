"""What every kubevirt-py service needs: logging, metrics, health, TLS, shutdown."""

__all__: list[str] = []
