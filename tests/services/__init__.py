"""Docker test services (engine, registry, base image) and their pytest fixtures; see docker_services.py."""
