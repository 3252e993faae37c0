"""Webhooks (issue 44): events queued in the transaction of the change they report, POSTed
signed to each tenant's subscribed receivers by the dispatcher. docs/webhooks.md."""
