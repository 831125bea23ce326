"""Adapters: turn what existing schedulers record into ledger events.

* ``slurm``: ``sacct --parsable2`` output (``import_sacct_file``);
* ``philly``: Philly-style jobs with attempts (``import_philly_file``);
* ``csv_trace``: any CSV through a column map (``import_csv_file``);
* ``kueue``: Kueue Workload objects, listed or watched (``import_kueue_file``).

Each format has one reader, which defines every rule of that format. The file readers take a
file a piece of whole lines at a time (``ledger.adapters.lines``); those of sacct and CSV take a
piece a column at a time (``ledger.adapters.columns``): each rule is a mask over the rows, applied
in the order the format states them, and a refused row's own fields are read back only to phrase
its rejection (file, line, field, value).

File adapters return an ``ImportResult``: the summary of how the file was read, and the events as
checked columns (ids derived from the source record so a repeated import adds nothing), handed as
they are made to the log's ``EventBatch`` of its ``Destination`` (the import command's), or kept.
"""

from ledger.adapters.common import ImportResult, Rejection

__all__ = ["ImportResult", "Rejection"]
