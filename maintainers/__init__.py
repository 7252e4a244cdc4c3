"""Tools for the people who maintain specsweep (see README.md here); not part of the installed package."""
