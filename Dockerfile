# The dashboard under gunicorn. Build: docker build -t why-it-performs .
# Run:   docker run -p 8050:8050 -v wip-cache:/cache why-it-performs
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    WIP_HOST=0.0.0.0 \
    WIP_PORT=8050 \
    WIP_CACHE_DIR=/cache \
    WIP_WORKERS=2

WORKDIR /app
COPY pyproject.toml README.md ./
COPY compute ./compute
COPY dashboard ./dashboard
# the page's CSS and scripts are part of the package (installed as dashboard/assets)
COPY assets ./assets
# the versions the test suite passed with (pyproject's 'pinned' extra)
RUN pip install ".[pinned]"
# the tree engine's compiled walk, compiled once here (numba's cache beside the installed module)
RUN python -c "from compute.trees import compiled; compiled.warm()"
COPY app.py gunicorn.conf.py ./

RUN useradd --create-home --uid 10001 wip && mkdir -p /cache && chown wip /cache
USER wip
VOLUME ["/cache"]
EXPOSE 8050

# Set WIP_SECRET_KEY in production (otherwise a random key is kept in /cache/secret_key).
CMD ["gunicorn", "-c", "gunicorn.conf.py", "app:server"]
