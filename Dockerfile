FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY orchestrator orchestrator
COPY workflows workflows
COPY activities activities
RUN pip install --no-cache-dir .
ENTRYPOINT []
CMD ["trainctl", "worker"]
