"""The air-gapped bundle: ``build.py`` makes it on a connected machine (``make bundle``), ``install.sh`` inside it
installs kumiho-ce on a machine without a network. Not part of the installed package."""
