# chunkstore with its Dask, S3 and notebook extras: one image for the scheduler,
# the workers and the Jupyter service of docker-compose.yml.
FROM python:3.11-slim
WORKDIR /opt/chunkstore
COPY pyproject.toml README.md ./
COPY chunkstore ./chunkstore
COPY notebooks ./notebooks
RUN pip install --no-cache-dir ".[s3]" jupyterlab nbclient ipykernel matplotlib bokeh
WORKDIR /work
