"""Image building: Dockerfiles parsed and executed by the project's own builder, stock images, base stand-ins."""
