"""Fleet analytics on Spark: a PySpark data source over the route tables and the report job.

Modules (only ``tables`` and ``scan`` are free of a pyspark import, so ``nsfleet analytics
--help`` and the executor-side reader stay cheap to import):

* ``tables``     the row tables: columns, types, key prefixes (shared by reader, docs and tests)
* ``scan``       executor side: partitioned SCAN + pipelined HMGET, typed rows
* ``datasource`` the ``nsfleet`` PySpark Python Data Source (``spark.read.format("nsfleet")``)
* ``session``    SparkSession construction for the command and the tests
* ``job``        the report's DataFrame computations (pure functions of DataFrames)
* ``report``     summary.md, summary.json, Parquet tables and PNG charts
* ``cli``        ``nsfleet analytics``: ``add_parser(subparsers)`` and ``run(args)``
"""
