"""The Docker wing: containers through the docker SDK, image snapshots, a warm pool."""
