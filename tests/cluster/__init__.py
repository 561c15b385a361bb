"""Tests on a local cluster of three region servers (a package: its cluster fixture stops after the folder's last test)."""
