"""Operations on a running deployment: backfill notifications, scan tables at a snapshot.

Layer: tools. Above ``caffeine.percolator``; its public names only, plus
``caffeine.percolator.inspect`` for showing protocol cells as they are.
"""
