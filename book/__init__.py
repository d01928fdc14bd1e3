"""The web book of the executed lessons (``make book``): see book/build.py."""
