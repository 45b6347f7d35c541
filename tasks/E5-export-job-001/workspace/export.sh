#!/bin/sh
# Nightly orders export: three batches into out/orders_export.csv (slow: about 6 s).
mkdir -p out
echo "id,total" > out/orders_export.csv
echo "EXPORT batch 1/3 ..."
sleep 3
echo "1001,20.00" >> out/orders_export.csv
echo "EXPORT batch 1/3 written"
sleep 3
echo "export failed: batch 2 rejected, customer table locked by the nightly vacuum" >&2
exit 4
