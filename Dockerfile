# One image for every Python service of docker-compose.yml: the Dask scheduler and workers
# (with the dashboard), the bucket creation and Jupyter, all running chunkstore from this
# repository with its [cluster] extra (obstore, s3fs, bokeh, jupyterlab, matplotlib, psutil).
FROM python:3.11-slim

WORKDIR /opt/chunkstore

# 1. The dependencies, from pyproject.toml alone: this layer is rebuilt only when the
#    dependencies change, not on every edit of the code (a stub package stands in for it).
COPY pyproject.toml ./
RUN mkdir chunkstore && touch chunkstore/__init__.py README.md \
    && pip install --no-cache-dir ".[cluster]" \
    && pip uninstall --yes chunkstore \
    && rm -rf chunkstore README.md build *.egg-info

# 2. The code (notebooks are not baked in: compose mounts ./notebooks).
COPY README.md ./
COPY chunkstore ./chunkstore
RUN pip install --no-cache-dir --no-deps .

WORKDIR /work
