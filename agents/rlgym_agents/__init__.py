"""Agents: turn env messages into model prompts and model text into actions; scripted agents for tests."""
