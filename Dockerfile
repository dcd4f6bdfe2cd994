# Flarebot's image, for hosts that can pull from a container registry. One image serves
# the web, worker and beat processes of docker-compose.yml.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FLAREBOT_DATA_DIR=/var/lib/flarebot \
    FLAREBOT_BIND=0.0.0.0

WORKDIR /app
# Debian's Chromium for browser_read (found at /usr/bin/chromium; Playwright drives it).
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt \
 && useradd --system --uid 10001 --home-dir /var/lib/flarebot --create-home flarebot

COPY . .

USER flarebot
EXPOSE 8000
CMD ["python", "-m", "flarebot.web", "-b", "0.0.0.0", "-p", "8000", "flarebot.asgi:application"]
