"""The task home: task folders, their images, and how their tests run in a sandbox."""
