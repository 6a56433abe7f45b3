"""ragd: the distribution's own import package (decision 0034).

Its subpackages live in the repository's top folders (daemon/, tray/, mcp_bridge/) and install
under this name; setup.py maps them. The package is a regular one, with this file, so that
``pip uninstall ragd`` removes its folder whole: a namespace folder holding no file of its own
was left behind, empty, and ``import ragd`` still succeeded.
"""
