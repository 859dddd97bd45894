"""Run by test_throwaway.py in a child pytest (not collected on its own: no test_ prefix)."""


def test_needs_redis(redis_url):
    import redis

    assert redis.Redis.from_url(redis_url).ping()
