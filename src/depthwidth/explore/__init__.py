"""`depthwidth explore`: the planner and a study's evidence in one interactive page, served on this machine.

`fields` (the page's inputs: flags of plan, calc, recommend and the limits), `argv` (the command lines run
and shown), `views` (axes, table, verdicts, detail rows, a pair side by side), `study` (a study's points
and its prescription's candidates), `api` (`Explorer`: the JSON API over the command line's own commands)
and `server` (the standard library's HTTP server, the page's static files). Layer: beside `report`, below
`cli`, which hands the explorer its commands (`depthwidth.cli.explore`).
"""

from depthwidth.explore.api import Commands, Explorer
from depthwidth.explore.fields import BadRequest
from depthwidth.explore.server import ExploreServer, make_server
from depthwidth.explore.study import StudySource

__all__ = ["BadRequest", "Commands", "ExploreServer", "Explorer", "StudySource", "make_server"]
