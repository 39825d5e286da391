"""The namespace wing: bubblewrap sandboxes on overlay snapshots of Docker-built images."""
