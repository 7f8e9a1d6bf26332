"""The local Vertex AI service: the CustomJob REST API and Cloud Logging's
entries:list, served on 127.0.0.1, running jobs with the local runner."""
