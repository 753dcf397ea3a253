FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config config
COPY registry registry
COPY reviews reviews
COPY learning learning
COPY sources sources
COPY api api
COPY gateway gateway
COPY demo demo
COPY templates templates
COPY manage.py ./
RUN pip install --no-cache-dir .
RUN useradd --create-home registry && chown -R registry /app
USER registry
EXPOSE 8000 8001
