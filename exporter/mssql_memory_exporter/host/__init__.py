"""Host-side facts SQL Server cannot report about itself: physical-disk writes (for SSD wear), memory,
swap, the sqlservr process' resident memory, and the mount table (which volume holds a path, which are
DAX). Only meaningful when the exporter runs on the SQL Server host."""
