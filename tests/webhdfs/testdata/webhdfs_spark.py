"""Reads a CSV file from a PlasmaFS WebHDFS gateway with PySpark (Hadoop's
webhdfs:// file system, as bundled with Spark), writes it back as Parquet
and reads that. Usage: webhdfs_spark.py webhdfs://HOST:PORT; run with
HADOOP_USER_NAME set. Prints the row count and sum, then OK."""

import sys

from pyspark.sql import SparkSession

base = sys.argv[1]
spark = (SparkSession.builder.master("local[2]").appName("plasma-webhdfs-test")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.option("header", True).csv(base + "/spark/in.csv")
print("rows", df.count(), "sum", df.selectExpr("sum(cast(n as int))").collect()[0][0])
df.write.mode("overwrite").parquet(base + "/spark/out.parquet")
back = spark.read.parquet(base + "/spark/out.parquet")
assert sorted(r["name"] for r in back.collect()) == ["a", "b", "c"], back.collect()
spark.stop()
print("OK")
